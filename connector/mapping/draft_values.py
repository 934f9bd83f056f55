"""What a column's name and sample values say in a draft (``pms-sync init``): the contract
member a name means, and whether the values are dates (in which format), numbers, keys, flags
or counts."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

"""Cell texts exports use for "no value" beyond the defaults of every input."""

# ------------------------------------------------------------------------------- matching


_ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
DATE_FORMATS = (
    "%d.%m.%Y",
    "%d.%m.%y",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%Y/%m/%d",
    "%d-%m-%Y",
    "%Y%m%d",
    "%d %b %Y",
    "%d %B %Y",
    "%b %d, %Y",
    "%d-%b-%y",
    "%d-%b-%Y",
)
"""strptime formats tried on a date column's samples, in order (day first before month first)."""

FLOAT_ID = re.compile(r"^\d+\.0+$|^\d(\.\d+)?[eE]\+?\d+$")
DECIMAL_COMMA = re.compile(r"^-?\d{1,3}(\.\d{3})*,\d+$|^-?\d+,\d+$")
_NUMBER = re.compile(r"^-?\d+([.,]\d+)?$")

# Normalised column names (lower case, no accents, letters and digits only) that name each
# member, one member a line; "unit." members are the accommodation's.
_SYNONYM_TABLE = """
id: bookingid bookingno bookingnr bookingnumber bookingref bookingreference booking
    reservationid reservationno reservationnr reservationnumber reservation resid resno resnr
    res confirmationno confirmationnumber confirmation buchungsnummer buchungsnr buchung
    reservierungsnummer reservierung confno confnr confnumber booknumber bookno booknr id
status: status bookingstatus reservationstatus state orderstate orderstatus bookingstate
    reservationstate currentstate
createdAt: createdat created bookedat bookedon bookingdate bookeddate booked reservationdate
    datecreated creationdate buchungsdatum gebuchtam dateadd dateadded
firstName: firstname first givenname forename vorname prenom nombre
lastName: lastname last surname familyname nachname apellido
fullName: guest guestname name fullname gast gastname customer customername
email: email emailaddress mail guestemail emailadresse
phone: phone telephone tel mobile phonenumber telefon handy
country: country nationality countrycode land nation pays herkunftsland
language: language lang sprache langue
channelName: channel channelname bookingsource source distributionchannel
marketSegment: marketsegment segment
agent: agent agency
guestNumber: guestno guestnumber guestnr guestindex guestpos gastnr gastnummer
mainGuest: mainguest primaryguest isprimary ismainguest ismain leadguest isleadguest
    hauptgast booker isbooker mainguestflag primaryflag
ratePlan: rateplan rateplancode rateplanname ratecode tarif tariff
cancellationPolicyCode: cancellationpolicycode cancellationpolicy cancelpolicy
    cancellationcode stornobedingung
unitId: room roomno roomnr roomnumber roomid unit unitid unitno apartment apartmentid zimmer
    zimmernr zimmernummer listing listingid flat
unitName: roomname unitname apartmentname listingname zimmername roomnum
unitRoomTypeName: roomtype reservedroomtype category kategorie zimmertyp unittype unitgroup
    spacecategory roomcategory
adults: adults adult pax persons guests numberofguests erwachsene adultes personen pers adl
    noofadult noofadults numberofadults adultcount nbadultes erw
children: children child kids kinder enfants chl noofchild noofchildren numberofchildren
    childcount nbenfants
babies: babies baby infants infant
checkin: arrival arrivaldate checkin checkindate from start startdate anreise anreisedatum
    datefrom arrivee llegada staydatefrom stayfrom
checkout: departure departuredate checkout checkoutdate to end enddate abreise abreisedatum
    dateto depart salida staydateto stayto
nights: nights numberofnights nachte naechte lengthofstay los
leadTime: leadtime leaddays daysinadvance vorlauf
rate: adr rate nightlyrate dailyrate pricepernight averagedailyrate
price: price amount total totalprice betrag revenue totalamount preis roomprice bookingprice
    gesamtpreis gesamtbetrag totalinclusiverate totalinclusive totalrate grandtotal
currency: currency wahrung waehrung devise
estimatedCheckInTime: eta arrivaltime checkintime expectedarrival ankunftszeit
estimatedCheckOutTime: etd departuretime checkouttime abreisezeit
comments: comments comment notes note remarks bemerkung bemerkungen
unit.id: unitid roomid id unit room roomno roomnumber zimmer zimmernr zimmernummer
    apartmentid apartment propertyid code
unit.name: name unitname roomname title bezeichnung apartmentname
street: street strasse streetname addressline1 address adresse
streetNumber: streetnumber housenumber streetno houseno hausnummer hausnr no nr
city: city town ort stadt ville
postalCode: zip zipcode postalcode postcode plz
wifiName: wifiname wifi ssid wlan wlanname wifinetwork wifissid
wifiCode: wifipassword wifipass wifikey wificode wlanpasswort wlanpassword wlancode password
doorCode: doorcode door keycode accesscode pin lockcode turcode tuercode
maxNumberOfGuests: maxguests maxoccupancy capacity maxpersons maxpersonen maxnumberofguests
bedroomsNumber: bedrooms bedroomsnumber schlafzimmer
floor: floor etage stock
sizeSqM: size sqm sizesqm m2 flache groesse
property: hotel hotelname hotelcode property propertyname propertyid objekt haus
"""


def _synonyms(table: str) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    member = ""
    for line in table.strip().splitlines():
        if not line.startswith(" "):
            member, _, line = line.partition(":")
            found[member] = ()
        found[member] += tuple(line.split())
    return found


SYNONYMS: dict[str, tuple[str, ...]] = _synonyms(_SYNONYM_TABLE)

ACCOMMODATION_SIGNS = ("street", "city", "postalCode", "wifiName", "wifiCode", "doorCode")


def normalise(name: str) -> str:
    """A column name reduced for matching: ``"Check-in Date"`` → ``"checkindate"``."""
    text = unicodedata.normalize("NFKD", name.replace("ß", "ss"))
    text = "".join(char for char in text if not unicodedata.combining(char))
    return re.sub(r"[^a-z0-9]", "", text.lower())


def date_format(values: list[str]) -> str | None:
    """ "" for ISO dates, a strptime format every sample parses with, or None."""
    if all(_ISO_DATE.match(value) for value in values):
        return ""
    for base in DATE_FORMATS:
        for suffix in ("", " %H:%M", " %H:%M:%S", " %I:%M %p"):
            try:
                for value in values:
                    datetime.strptime(value, base + suffix)
                return base + suffix
            except ValueError:
                continue
    return None


def is_date(values: list[str]) -> bool:
    return date_format(values) is not None


def is_number(values: list[str]) -> bool:
    return all(
        _NUMBER.match(value.replace(" ", "")) or FLOAT_ID.match(value) or DECIMAL_COMMA.match(value)
        for value in values
    )


def is_key(values: list[str]) -> bool:
    """Values that can identify rows: (nearly) all different."""
    return len(values) < 5 or len(set(values)) >= 0.9 * len(values)


def not_a_date(values: list[str]) -> bool:
    return not is_date(values)


TRUE_WORDS = frozenset({"y", "yes", "true", "1", "x", "j", "ja", "oui", "si", "sí", "main"})


def is_flag(values: list[str]) -> bool:
    """Two values, one of them saying yes (Y/N, true/false, 1/0)."""
    distinct = {value.lower() for value in values}
    return 1 <= len(distinct) <= 2 and bool(distinct & TRUE_WORDS)


def is_count(values: list[str]) -> bool:
    return all(re.fullmatch(r"\d+(\.0+)?", value) for value in values)
